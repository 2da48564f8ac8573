"""Kafka's wire protocol, sans I/O: bytes in, objects out, never a socket.

* ``framing`` — the 4-byte size prefix, checked before anything is allocated;
* ``api_keys`` — every API key the codec knows: name, the versions it can parse, the first flexible
  version (which decides the header versions);
* ``headers`` — request header v1/v2, response header v0/v1;
* ``codec`` — message bodies through ``kio`` (a dataclass per message and version);
* ``produce_request`` / ``produce_response`` / ``fetch_response`` — the hot paths, written here: a
  Produce request's records stay a ``memoryview`` into the frame, a Produce response is encoded in
  one pass, and a Fetch response is a list of chunks whose record parts are file regions sent with
  ``sendfile``.
"""
