"""Runtime: everything that runs torch (profiling, and later execution). Imports torch."""
