import CLibCurl
import FolioCore
// The HTTP source is being built on the http branch; this file only keeps the target compiling.

