"""The libvirt backend: the connection, the host's facts, domain XML, image storage, leftovers from
earlier runs, and the backend itself."""
