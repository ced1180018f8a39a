"""Singer tap for an access-governance service (grant feed, apps and app entitlements, automation exclusions, users)."""

from importlib.metadata import version

# How the tap names itself to the service (every request's User-Agent): its own reads are
# then told apart in the service's system log (``system_log.http_user_agent``).
USER_AGENT = f"tap-accessgov/{version('tap-accessgov')}"
