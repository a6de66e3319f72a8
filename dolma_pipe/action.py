"""What a command that is not a stage is: a config model and one ``run`` that returns a report.

Stages (:class:`dolma_pipe.stage.Stage`) go through the runner, with markers and
a manifest; an action (training a classifier, say) does one job in the driver
and returns the text the CLI prints.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel

C = TypeVar("C", bound=BaseModel)


class Action(ABC, Generic[C]):
    name: ClassVar[str]
    description: ClassVar[str] = ""
    config_model: ClassVar[type[BaseModel]]

    def __init__(self, config: C):
        self.config: C = config

    @abstractmethod
    def run(self) -> str:
        """Do the work; return the report to print."""
