// The one source of a precompiled-header host target (cmake/CapsulePch.cmake):
// the PCH is built beside it and reused by every target with the same flags.
