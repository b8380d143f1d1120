"""The measurement stage (adapters): link, queue, CPU and TCP counters
sampled while a workload runs, packet captures, and latency probes."""
