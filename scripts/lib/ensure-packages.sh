# ensure_packages CMD:PKG ... installs the Debian packages whose commands are missing,
# or stops with a message naming them when it cannot (not root, or no apt-get).
ensure_packages() {
	local missing=() pair
	for pair in "$@"; do
		command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	# shellcheck disable=SC2207
	missing=($(printf '%s\n' "${missing[@]}" | sort -u))
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "certificatee: missing Debian packages: ${missing[*]}" >&2
		echo "install them first: sudo apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	echo "installing Debian packages: ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
