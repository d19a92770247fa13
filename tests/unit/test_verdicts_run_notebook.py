"""run.notebook (gpudiag.verdicts.run.notebook) with plain data: what a watched block
could not see, from what was observed."""

from __future__ import annotations

from gpudiag.verdicts.run.notebook import KernelSeen, notebook


def test_tensorflow_from_the_block_on_sees_everything() -> None:
    f = notebook(KernelSeen(imported_before=(), initialized_before=None, loops=1,
                            dataset_calls=3))
    assert f.id == "run.notebook" and f.status == "ok"
    assert f.evidence["unseen"] == []


def test_tensorflow_set_up_before_the_block_is_said() -> None:
    f = notebook(KernelSeen(imported_before=("tensorflow", "keras"), initialized_before=True,
                            loops=1, dataset_calls=0))
    assert f.status == "ok"
    unseen = f.evidence["unseen"]
    assert len(unseen) == 3
    assert "TensorFlow's import" in unseen[0] and "initialised before" in unseen[1]
    assert "tf.data pipeline" in unseen[2]
    assert "Import TensorFlow and build" in f.advice


def test_no_training_loop_says_nothing_of_a_pipeline() -> None:
    f = notebook(KernelSeen(imported_before=("tensorflow",), initialized_before=False,
                            loops=0, dataset_calls=0))
    assert len(f.evidence["unseen"]) == 1


def test_a_function_replaced_again_by_the_kernel_is_a_warning_that_names_it() -> None:
    f = notebook(KernelSeen(imported_before=(), initialized_before=None, loops=0,
                            dataset_calls=0, not_restored=("Model.fit",)))
    assert f.status == "warn" and "Model.fit" in f.message
