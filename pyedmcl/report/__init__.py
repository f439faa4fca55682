"""The demo report: every analysis on bundled sample data, with plots and JSON."""
