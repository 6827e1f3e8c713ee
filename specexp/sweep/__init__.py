"""Many points: planning jobs by server, the grid and Optuna sweepers on one skeleton, the search
space, and the live recorder (parent run, summary, verdict)."""
