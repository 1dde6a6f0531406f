"""How a task type is declared and what comes next, with no I/O."""
