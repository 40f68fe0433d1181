"""Search: frontier algebra, frontier tracking, brute force, MCMC, Tofu, baselines, modes."""
