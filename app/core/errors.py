"""Typed domain errors. Each carries a message written for the person at the desk."""


class DynadeskError(Exception):
    """Base of every error the application expects and can explain."""


class NotFound(DynadeskError):
    pass


class TaskDefinitionError(DynadeskError):
    def __init__(self, source: str, field: str, problem: str):
        self.source, self.field, self.problem = source, field, problem
        super().__init__(f"{source}: field '{field}': {problem}")


class DatabaseError(DynadeskError):
    pass


class InvalidExample(DynadeskError):
    pass


class ValidationRuleError(DynadeskError):
    """A verdict that the task's validation rules do not allow."""


class ImportFailed(DynadeskError):
    def __init__(self, problems: list["ImportProblem"], source: str):
        self.problems, self.source = problems, source
        head = "\n".join(str(p) for p in problems[:20])
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(
            f"{source}: {len(problems)} bad row(s); nothing was imported.\n{head}{more}\n"
            "Fix the rows, or import again with --skip-bad-rows to import the rest."
        )


class ImportProblem:
    def __init__(self, line: int, reason: str):
        self.line, self.reason = line, reason

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"

    def __repr__(self) -> str:
        return f"ImportProblem({self.line!r}, {self.reason!r})"
