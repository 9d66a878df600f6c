"""The benchmarks, run from the repository root as modules: `python -m bench.<name>`
(bench/README.md lists them). Their workers run the same way, as `bench.<worker>` or,
in a peer's virtual environment, `bench.peers.<worker>` (bench/driver.py)."""
