//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte frame head, the frame
//! types and flags, and the writers of the frames a server sends.
