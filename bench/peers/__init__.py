"""The peers' benchmark workers and the round protocol every worker speaks (protocol).

Each runs in its peer's virtual environment (bench/peer_envs.py), which has neither
bert_tf's dependencies nor the bench package's: they import only this package."""
