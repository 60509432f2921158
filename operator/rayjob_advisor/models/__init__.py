"""Runtime models: candidate estimators, evaluation splits, calibration, selection."""
