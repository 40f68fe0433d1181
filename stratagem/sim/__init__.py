"""Execution simulator (FlexFlow §5): task graph, full and delta simulation, timeline, trace."""
