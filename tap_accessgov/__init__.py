"""Singer tap for an access-governance service (grant feed, apps and app entitlements, automation exclusions, users)."""
