"""The runtime: the Celery app and its tasks, the coordinator's pass, the agent jobs and what they share
(the worker's context, leases, shutdown), publishing and pushing a run's result. It uses every other
subpackage of ``workers``; none of them imports it (the layers contract in pyproject.toml)."""
