"""The classic consumer group protocol: ``GroupCoordinator`` and the group/member state it keeps."""
