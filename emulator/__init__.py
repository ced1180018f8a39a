"""A strict local emulator of the access-governance API, for the tap's tests and demos.

from emulator import Emulator, Dataset, make_credential
with Emulator(Dataset(seed=1, events=5000), credential=make_credential(seed=7)) as emu:
    ...  # emu.url, emu.faults, emu.stats, emu.add_events(...)
"""

from emulator.auth import Credential, make_credential
from emulator.control import Emulator
from emulator.dataset import Dataset
from emulator.faults import Faults

__all__ = ["Credential", "Dataset", "Emulator", "Faults", "make_credential"]
