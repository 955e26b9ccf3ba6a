"""xdn.wire.v1 — generated from protos/xdn/wire/v1/*.proto by ``make proto``. Do not edit."""
