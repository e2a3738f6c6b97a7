"""The memory bank as a Dagster resource; where it lives is configuration, not code."""


from pathlib import Path

import dagster as dg

from smb_core.bank import Bank
from smb_core.settings import Settings, get_settings


class MemoryBankResource(dg.ConfigurableResource):
    """Gives assets the bank and the corpus folder. Empty fields fall back to SMB_* settings."""

    bank_dir: str = ""
    kbmd_dir: str = ""

    def settings(self) -> Settings:
        base = get_settings()
        updates = {}
        if self.bank_dir:
            updates["memory_bank_dir"] = Path(self.bank_dir)
        if self.kbmd_dir:
            updates["kbmd_dir"] = Path(self.kbmd_dir)
        return base.model_copy(update=updates)

    def open(self) -> Bank:
        return Bank(settings=self.settings())

    @property
    def corpus_dir(self) -> Path:
        return Path(self.settings().kbmd_dir).resolve()


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources={"bank": MemoryBankResource()})
