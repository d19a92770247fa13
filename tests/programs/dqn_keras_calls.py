"""A DQN agent written the way the "Deep Q-Learning with Keras" tutorials and the questions
about them write it: ``act`` calls ``model.predict(state)``, ``replay`` walks a minibatch
of the replay memory after each episode and, for every sample, calls ``model.predict`` twice and
``model.fit(state, target_f, epochs=1, verbose=0)`` once. A tiny environment of its own
(no gym): a state of 4 numbers, 2 actions, episodes of 20 steps.

    python dqn_keras_calls.py [fixed]

``fixed`` is the hand-fixed twin: ``model(state, training=False)`` to act, and per replay
one batched prediction and one ``train_on_batch`` for the whole minibatch. Prints
``replay s: <seconds>`` (the replays' own time) and ``calls: <n>``. Exit 0.
"""

import random
import sys
import time
from collections import deque

import numpy as np
from tensorflow import keras

FIXED = "fixed" in sys.argv[1:]
EPISODES, STEPS, BATCH = 2, 20, 10
random.seed(0)
np.random.seed(0)
keras.utils.set_random_seed(0)


class Env:
    def reset(self):
        self.t, self.state = 0, np.random.uniform(-0.05, 0.05, 4)
        return self.state

    def step(self, action):
        self.t += 1
        self.state = self.state + (0.01 if action else -0.01) + np.random.normal(0, 0.01, 4)
        done = self.t >= STEPS or abs(self.state[0]) > 0.5
        return self.state, (0.0 if done else 1.0), done


class DQNAgent:
    def __init__(self, state_size, action_size):
        self.action_size = action_size
        self.memory = deque(maxlen=2000)
        self.gamma, self.epsilon = 0.95, 0.5
        self.model = keras.Sequential([
            keras.Input((state_size,)),
            keras.layers.Dense(24, activation="relu"),
            keras.layers.Dense(24, activation="relu"),
            keras.layers.Dense(action_size, activation="linear")])
        self.model.compile(loss="mse", optimizer=keras.optimizers.Adam(learning_rate=0.001))
        self.calls = 0

    def remember(self, state, action, reward, next_state, done):
        self.memory.append((state, action, reward, next_state, done))

    def act(self, state):
        if np.random.rand() <= self.epsilon:
            return random.randrange(self.action_size)
        self.calls += 1
        if FIXED:
            act_values = self.model(state, training=False).numpy()
        else:
            act_values = self.model.predict(state, verbose=0)
        return int(np.argmax(act_values[0]))

    def replay(self, batch_size):
        minibatch = random.sample(self.memory, batch_size)
        if FIXED:
            self.replay_batched(minibatch)
            return
        for state, action, reward, next_state, done in minibatch:
            target = reward
            if not done:
                target = reward + self.gamma * np.amax(self.model.predict(next_state,
                                                                          verbose=0)[0])
            target_f = self.model.predict(state, verbose=0)
            target_f[0][action] = target
            self.model.fit(state, target_f, epochs=1, verbose=0)
            self.calls += 3

    def replay_batched(self, minibatch):
        states = np.concatenate([m[0] for m in minibatch])
        next_states = np.concatenate([m[3] for m in minibatch])
        q = self.model(np.concatenate([states, next_states]), training=False).numpy()
        target_f, q_next = q[:len(minibatch)], q[len(minibatch):]
        for i, (_, action, reward, _, done) in enumerate(minibatch):
            target_f[i][action] = reward if done else reward + self.gamma * np.amax(q_next[i])
        self.model.train_on_batch(states, target_f)
        self.calls += 2


env, agent = Env(), DQNAgent(4, 2)
replay_s = 0.0
for _episode in range(EPISODES):
    state = np.reshape(env.reset(), [1, 4])
    for _ in range(STEPS):
        action = agent.act(state)
        next_state, reward, done = env.step(action)
        next_state = np.reshape(next_state, [1, 4])
        agent.remember(state, action, reward, next_state, done)
        state = next_state
        if done:
            break
    if len(agent.memory) > BATCH:  # after each episode, as keon's deep-q-learning does
        t0 = time.perf_counter()
        agent.replay(BATCH)
        replay_s += time.perf_counter() - t0
print(f"replay s: {replay_s:.2f}")
print(f"calls: {agent.calls}")
