"""Log compaction (Kafka's log cleaner): see ``cleaner.py`` for one round, ``log_cleaner.py`` for the
background threads and ``log_cleaner_manager.py`` for which logs are cleaned and their checkpoints."""
