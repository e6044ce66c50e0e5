"""Task definitions: YAML files validated with pydantic, plus the fooled metrics they name."""

from app.core.tasks.definition import (
    FooledMetric,
    InputKind,
    MetadataKind,
    TaskCatalog,
    TaskDefinition,
    builtin_tasks_dir,
    load_catalog,
    load_task_file,
)

__all__ = [
    "FooledMetric",
    "InputKind",
    "MetadataKind",
    "TaskCatalog",
    "TaskDefinition",
    "builtin_tasks_dir",
    "load_catalog",
    "load_task_file",
]
