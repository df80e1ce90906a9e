# Node.js for the project's scripts: the supported LTS lines are 22 (>= 22.19) and 24.
#
# ensure_node        keeps the machine's node when it is 22.19 or later; otherwise puts Node 24 on PATH.
# use_node MAJOR     puts Node MAJOR (22 or 24) on PATH: the machine's node when it is that line, else a copy
#                    installed from the npm registry's node-linux-<arch> package into .tools/node<MAJOR>
#                    (gitignored; the machine's npm installs it, then runs on the new node).
# Source it from the project's root, after `set -euo pipefail`.

# Pinned so every run of a line uses the same binary; CERTIFICATEE_NODE_22 / _24 override.
CERTIFICATEE_NODE_22="${CERTIFICATEE_NODE_22:-22.23.5}"
CERTIFICATEE_NODE_24="${CERTIFICATEE_NODE_24:-24.22.3}"

# Prints the version of the node on PATH (without the "v"), or nothing.
_node_version() {
	command -v node >/dev/null 2>&1 && node -p 'process.versions.node' 2>/dev/null || true
}

# _version_at_least A B: A >= B for dotted versions.
_version_at_least() {
	[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

use_node() {
	local major="$1" current pinned arch dir bin
	current="$(_node_version)"
	if [ "${current%%.*}" = "$major" ] && _version_at_least "$current" "22.19.0"; then
		return 0
	fi
	case "$major" in
	22) pinned="$CERTIFICATEE_NODE_22" ;;
	24) pinned="$CERTIFICATEE_NODE_24" ;;
	*)
		echo "certificatee: Node.js $major is not a supported line (22 or 24)" >&2
		exit 1
		;;
	esac
	case "$(uname -m)" in
	x86_64) arch=x64 ;;
	aarch64) arch=arm64 ;;
	*)
		echo "certificatee: no Node.js $major package for $(uname -m); install Node.js 22.19+ or 24 and retry" >&2
		exit 1
		;;
	esac
	dir="$PWD/.tools/node$major"
	bin="$dir/node_modules/node-linux-$arch/bin"
	if [ "$("$bin/node" -p 'process.versions.node' 2>/dev/null || true)" != "$pinned" ]; then
		if ! command -v npm >/dev/null 2>&1; then
			echo "certificatee: Node.js $major is needed (found: ${current:-no node}) and there is no npm to install it" >&2
			echo "install Node.js 22.19+ or 24 (https://nodejs.org), or npm (sudo apt-get install -y npm), and retry" >&2
			exit 1
		fi
		echo "installing Node.js $pinned into .tools/node$major (found: ${current:-no node})" >&2
		mkdir -p "$dir"
		npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "node-linux-$arch@$pinned" >&2
	fi
	export PATH="$bin:$PATH"
	hash -r
	if [ "$(_node_version)" != "$pinned" ]; then
		echo "certificatee: installed Node.js $pinned into .tools/node$major but node on PATH is $(_node_version)" >&2
		exit 1
	fi
}

ensure_node() {
	local current
	current="$(_node_version)"
	if [ -n "$current" ] && _version_at_least "$current" "22.19.0"; then
		return 0
	fi
	use_node 24
}
