"""One point: one server configuration at one load, measured and recorded.

One job per module, the data flowing one way: plan (what the point will run) -> serve (its server,
launched or reused) -> windows (warm-up and the measured loop, under watch for the engine's stall or
death) -> record (its files on disk) -> upload (its MLflow run); job sequences them. ARCHITECTURE.md.
"""
