"""Reports on plans and frontiers: tables, plots, explain, diff, and the papers' figures reproduced.

    units        memory sizes from text (16GB, 14.5GiB, 2e10) and bytes / seconds as text
    console      rich tables and spinners on a terminal, plain text when piped
    tables       a table as a value: plain text, Markdown, CSV
    planning     the `plan` and `frontier` commands' work: model, cluster, mode, algorithm
    replay       a plan file back into a simulation (its graph, cluster and strategy)
    explain      per-op configuration, time, memory and communication of a plan
    picture      the strategy as ops by devices (FlexFlow Fig. 12-13), text and PNG
    diff         what changed between two plans
    frontier_plot  peak memory against iteration time with the baselines (TensorOpt Fig. 6)
    reproduce/   the papers' figures and tables on the simulated clusters

Nothing here imports torch; matplotlib is imported only by the functions that draw.
"""
