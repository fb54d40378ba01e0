import FolioCore
