// Package dockerfile is the front end of `cairn image build`: it parses a
// Dockerfile in Docker's syntax and plans the build as a list of steps an
// executor runs in order (RUN in a sandbox, COPY and ADD into the root,
// the rest changing only the image config).
//
// Parse does what needs no values: parser directives (escape, syntax),
// comments, line continuations, the instruction word, flags, exec (JSON)
// and shell forms, and refuses what cairn does not build: instructions
// other than FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, EXPOSE, CMD,
// ENTRYPOINT, LABEL and MAINTAINER, a second FROM (multi-stage builds),
// COPY --from, RUN --mount and heredocs.
//
// Plan does what needs values: it expands variables ($VAR, ${VAR},
// ${VAR:-word}, ${VAR:+word}, ...) as Docker does in FROM, COPY, ADD, ENV,
// ARG, EXPOSE, LABEL, USER and WORKDIR, resolves ARG scope and
// --build-arg values, starts from the base image's config and records the
// config after every step.
//
// Both are pure: no files, no network, no clock. Errors are *Error and
// name the Dockerfile's line. docs/dockerfile.md lists what is supported.
package dockerfile
