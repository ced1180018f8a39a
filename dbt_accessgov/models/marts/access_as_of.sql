-- The grants held at one instant: the var as_of (e.g. --vars '{as_of: "2025-03-01T00:00:00Z"}'),
-- or when the models were built. The access_as_of() macro gives the same for any instant
-- inside your own models.
{{ access_as_of() }}
