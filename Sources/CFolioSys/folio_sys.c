#include "folio_sys.h"
