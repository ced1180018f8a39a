"""Singer tap for an access-governance service (grant feed, automation exclusions, users)."""
