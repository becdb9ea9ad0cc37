"""What models/, attacks/ and audit/ share: seeding, progress, validation, record types and the
DP-SGD step schedule. Imports none of those packages (tests/test_layers.py checks it)."""
