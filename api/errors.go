package api

// ErrorBody is the one JSON shape of every API error:
//
//	{"error":{"code":"S01","message":"no sandbox named \"web\""}}
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo is the code and human message of an API error.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Stable error codes. They are documented in docs/errors.md; never reuse or
// renumber one. The letter says the area: V validation, S sandboxes,
// I images, K checkpoints, L limits, N networks, A auth, O operations,
// P published ports, X internal.
const (
	CodeInvalidName     = "V01" // a name does not match ^[a-z0-9][a-z0-9-]{0,62}$
	CodeInvalidArgument = "V02" // a flag or field has a bad value
	CodeInvalidRequest  = "V03" // the request body or method is malformed

	CodeUnauthenticated = "A01" // no API token, or one that is not valid, has expired or was revoked
	CodeForbidden       = "A02" // the token's role does not allow this (read cannot change anything; admin manages accounts and tokens)
	CodeRateLimited     = "A03" // too many requests with this token: wait for Retry-After
	CodeNoAccount       = "A04" // no account with that name
	CodeAccountNotEmpty = "A05" // the account still holds sandboxes or checkpoints
	CodeNoToken         = "A06" // no token with that id
	CodeTokenNameTaken  = "A07" // the account has a token with that name already
	CodeAccountExists   = "A08" // an account with that name exists already
	CodeCSRF            = "A09" // a change sent with a console session cookie but without its CSRF token (X-Cairn-CSRF)

	CodeNoSandbox        = "S01" // no sandbox with that name in the account
	CodeNameTaken        = "S02" // a sandbox with that name already exists
	CodeAlreadyRunning   = "S03" // start of a running sandbox
	CodeNotRunning       = "S04" // stop, exec or console of a stopped sandbox
	CodeSandboxBusy      = "S05" // another operation on the sandbox is in progress
	CodeRuntimeFailed    = "S06" // the runtime (runsc) failed to start, stop or run
	CodeAgentUnreachable = "S07" // cairn-init inside the sandbox did not answer
	CodeExecFailed       = "S08" // the command could not be started (not found, not executable)
	CodeNoService        = "S09" // the sandbox defines no service with that name
	CodeSandboxDown      = "S10" // the sandbox crashed, or its cairn-init is not connected
	CodeExecTimedOut     = "S11" // a command ran past its --timeout and was killed (exit code 124)
	CodeNoProcess        = "S12" // no background process, nor running attached exec, with that pid in the sandbox
	CodeProcessExited    = "S13" // the process has exited: it cannot be signalled or written to
	CodeNotBackground    = "S14" // the process is an attached exec: its output and stdin are its client's
	CodeStdinClosed      = "S15" // the process's stdin is closed
	CodeStdinFull        = "S16" // the process did not read its stdin for api.StdinWait

	CodeNoImage          = "I01" // no image with that name
	CodeImageBuildFailed = "I02" // building an image failed
	CodeNoSuchImage      = "I03" // the registry or archive has no such image (name, tag or platform)
	CodeRegistryDenied   = "I04" // the registry refused the credentials (or asked for some)
	CodeRegistryFailed   = "I05" // the registry could not be reached or answered with an error
	CodeImageDamaged     = "I06" // the image is damaged or unsafe: a digest that does not match, a layer that is not a tar or leaves its root
	CodeImageExists      = "I07" // an image of that name exists already (another digest), or the name is a built-in image's
	CodeImageInUse       = "I08" // sandboxes or checkpoints still use the image
	CodeDockerfile       = "I09" // the Dockerfile is not valid, or uses what cairn image build does not support
	CodeBuildStepFailed  = "I10" // a step of an image build failed: a RUN's command exited non-zero, a COPY's source is missing
	CodeStepTimeout      = "I11" // a build's RUN step ran past its time limit (--step-timeout) and was ended
	CodeStepOutOfMemory  = "I12" // a build's RUN step used more memory than its limit (--memory) and was ended
	CodeContextRefused   = "I13" // the build context holds what a build does not take: a device, FIFO, hard link, whiteout, "..", a path through a link, control characters in a name
	CodeContextTooLarge  = "I14" // the build context is over a bound: its bytes, its entries, a name's length or depth

	CodeCheckpointFailed  = "K01" // taking the checkpoint failed (pause, snapshot); the sandbox was resumed
	CodeSnapshotNameTaken = "K02" // a snapshot with that name already exists in the account
	CodeCheckpointCurrent = "K03" // the checkpoint is a sandbox's current one and cannot be deleted
	CodeMemoryImageBad    = "K04" // the checkpoint's memory image is missing or corrupt (restore it --disk-only)
	CodeNoMemory          = "K05" // the checkpoint holds no memory (restore it without --memory)
	CodeNoCheckpoint      = "K08" // no checkpoint/snapshot with that id or name in the account
	CodeLocalGone         = "K09" // the checkpoint's local copy is gone (restore it from off-site)

	CodeDiskLimit        = "L04" // the account's disk limit is reached
	CodeTooManyRequests  = "L05" // a sandbox's management socket got more requests than its rate allows
	CodeInsideQuota      = "L06" // checkpoints from inside a sandbox: more in a minute than its settings allow
	CodePoolFull         = "L07" // the pool's space for sandboxes and checkpoints is used up
	CodeTooManyProcesses = "L10" // the sandbox keeps api.MaxProcesses background processes already

	CodeOffsiteUnavailable = "R01" // the off-site repository cannot be used now (locations unreachable, wrong key, disabled)
	CodeNotOffsite         = "R02" // the checkpoint is not (yet) held by any off-site location
	CodeNoLocation         = "R03" // no off-site location with that name
	CodeOffsiteFailed      = "R04" // reading the checkpoint back from off-site failed (damaged or missing data)

	CodeNetworkUnavailable = "N01" // the sandbox's network could not be made or is off
	CodeInvalidRule        = "N02" // a network rule is not an IPv4 address, CIDR or domain pattern
	CodePortNotPublished   = "P01" // the sandbox has not published that port
	CodePortCredentials    = "P02" // a private port, and the request carries no valid port token
	CodePortNotRunning     = "P03" // the sandbox of the port is not running
	CodePortUnreachable    = "P04" // nothing answered on the port inside the sandbox

	CodeNoFile      = "F01" // no such file or directory in the sandbox
	CodeFileExists  = "F02" // a file or directory is in the way
	CodeNotDir      = "F03" // a path element, or what the op needs to be a directory, is not one
	CodeIsDir       = "F04" // the op needs a file, and the path is a directory
	CodeDirNotEmpty = "F05" // the directory is not empty (remove it with recursive)
	CodeFileDenied  = "F06" // the sandbox's file system refused: read-only, or a file that cannot be changed
	CodeFileNoSpace = "F07" // the sandbox's disk is full (its disk size, or the pool)
	CodeBadTar      = "F08" // the body is not a tar stream, or holds an entry that cannot be extracted
	CodeFileFailed  = "F09" // reading or writing the file failed inside the sandbox (an I/O error, a stream cut short)
	CodeWatchLimit  = "L08" // the sandbox has as many watch streams open as it may (api.MaxWatchStreams)
	CodeFileLimit   = "L09" // the answer would be too large: a list of more than api.MaxListEntries entries, a tar of more than api.MaxTarEntries

	CodeNoOperation = "O01" // no operation with that id
	CodeInterrupted = "O02" // the operation was interrupted by a cairnd restart and undone at its start

	CodeNoHost   = "H01" // no host with that name (--host)
	CodeHostDown = "H02" // the host is down (its heartbeat stopped) or cannot be reached, or has no API address the others reach
	CodeHostUp   = "H03" // the host is up (or is this one): only a host that is down is evacuated, only its sandboxes restored on another

	CodeInternal = "X01" // an unexpected failure inside cairnd
)
