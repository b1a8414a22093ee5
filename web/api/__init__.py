"""The API objects: each request body and each response object is a pydantic model, one
module per resource (its fields, limits and descriptions, which the OpenAPI document is
generated from), and each response object's shaper is derived from its model
(:mod:`.shaping`), so an object is defined once (docs/architecture.md, "API
resources")."""
