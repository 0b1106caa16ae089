"""Gate two checked-out trees: configs, on_paths, calibration; no GitHub."""
