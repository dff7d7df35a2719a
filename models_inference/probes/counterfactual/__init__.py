"""Counterfactual probe family (Howard et al., seed 003)."""
