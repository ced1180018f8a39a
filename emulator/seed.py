"""What a dataset derives from its seed: stable ids and cheap hashes for per-position choices.

Every concern (catalog, users, exclusions, lifecycles, feed) draws from the one key, so one
seed gives one tenant; each draws under its own tags, so no concern shifts another's draws.
"""

from __future__ import annotations

import hashlib

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MASK64 = (1 << 64) - 1


class Seed:
    """A dataset's seed (``value``, which also names its ``random.Random`` streams) and key."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.key = hashlib.blake2b(f"dataset:{value}".encode(), digest_size=32).digest()
        self._k64 = int.from_bytes(self.key[:8], "little")

    def id(self, *parts: object) -> str:
        """A stable, KSUID-looking id (27 base62 chars starting with '2')."""
        digest = hashlib.blake2b(repr(parts).encode(), key=self.key, digest_size=24).digest()
        n = int.from_bytes(digest, "little")
        chars = ["2"]
        for _ in range(26):
            n, r = divmod(n, 62)
            chars.append(BASE62[r])
        return "".join(chars)

    def mix(self, tag: int, x: int) -> int:
        """A 32-bit hash of (tag, x): one multiply-xorshift round, cheap enough to run several
        times per event (lane and segment parameters); ``digest`` stays for per-event draws."""
        y = (x * 0x9E3779B97F4A7C15 + tag * 0xD1B54A32D192ED03 + self._k64) & MASK64
        y = (y ^ (y >> 29)) * 0xBF58476D1CE4E5B9 & MASK64
        return (y ^ (y >> 32)) & 0xFFFFFFFF

    def digest(self, i: int) -> int:
        """256 keyed bits for position ``i``, to be divided into that position's draws."""
        digest = hashlib.blake2b(i.to_bytes(8, "little"), key=self.key, digest_size=32).digest()
        return int.from_bytes(digest, "little")
