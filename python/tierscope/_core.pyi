# Type stubs of the Rust extension module (crates/tierscope-py).
from pathlib import Path
from typing import Any

__version__: str

class ConfigError(ValueError):
    file: str
    line: int | None
    message: str

class RunError(RuntimeError): ...
class Cancelled(RunError): ...

class Experiment:
    name: str
    seed: int
    duration_ns: int
    hot_threshold: int
    block_size: int
    monitor_names: list[str]
    def to_json(self) -> str: ...

class RunHandle:
    def progress(self) -> tuple[int, int]: ...
    def done(self) -> bool: ...
    def cancel(self) -> None: ...
    def result(self) -> dict[str, Any]: ...

def parse_experiment(text: str, source: str, base_dir: str | Path, format: str) -> Experiment: ...
def start_run(experiment: Experiment, max_threads: int = 0) -> RunHandle: ...
