"""The replay stage (adapters): the agents that run each rank's steps over
real TCP in the emulated hosts, and a user's own programs in their place."""
