"""agentmesh's own cost, measured against raw gRPC and raw PostgreSQL in the same run.

`python -m bench` (`make bench`) runs everything and writes `bench/results/latest.json`;
`python -m bench --smoke` (`make bench-smoke`) is the seconds-long version CI runs, which only
checks that every figure is produced. See docs/performance.md for what the figures mean.
"""
