"""Benchmarks behind `make bench`: each module bench/bench_*.py has ``run(ctx) -> list[Result]``."""
