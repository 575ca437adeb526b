"""The error body every endpoint answers with, as the OpenAPI schema shows it: DRF's
`{"detail": ...}` or a field dict. Tenants sits lowest, so every app's API reads it here."""

ERROR = {"type": "object", "properties": {"detail": {"type": "string"}}, "additionalProperties": True}
