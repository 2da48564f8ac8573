"""Tools over Kafka's files from the outside: ``dump-log`` (``dump_log``, ``dump_log_render``),
``verify`` (``verify``) and ``recover`` (``repair``). They sit above ``storage`` like the CLI, which
only adapts them to arguments and exit codes."""
