"""Compare base and head under the rules: paired statistics, outcomes."""
