import CLibSSH2
import FolioCore
// The SFTP source is being built on the sftp branch; this file only keeps the target compiling.

